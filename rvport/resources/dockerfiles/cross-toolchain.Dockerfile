# rvport cross toolchain stage: the build-platform base (debian-trixie-xtc, GCC 14 for riscv64) plus the
# Debian packages of a kind's riscv64 cross toolchain (rvport/cross.py) and the recipe's own build tools.
# riscv64 is added as a foreign dpkg architecture first, for Multi-Arch: same libraries such as
# libstd-rust-dev:riscv64; a package that must be unpacked instead (kinds.CrossToolchain.unpack) is downloaded
# and its one directory unpacked, its version added to the image's package list.
# Reaches the network (apt) like every toolchain stage; the CA bundle is a secret. The steps after apt's
# (unpack, versions matched, compilers recorded) are resources/scripts/cross-toolchain.sh, bind-mounted
# from the build context: nothing of it stays in the image.
FROM @@BASE@@
ENV DEBIAN_FRONTEND=noninteractive
RUN --mount=type=secret,id=rvport-ca \
    --mount=type=bind,source=cross-toolchain.sh,target=/run/rvport/cross-toolchain.sh \
    set -eu; \
    if [ -s /run/secrets/rvport-ca ]; then ca="-o Acquire::https::CAInfo=/run/secrets/rvport-ca"; else ca=""; fi; \
    dpkg --add-architecture @@FOREIGN_ARCH@@; \
    apt-get $ca -o Acquire::Languages=none update; \
    apt-get $ca install -y --no-install-recommends @@PACKAGES@@; \
    RVPORT_APT_CA=/run/secrets/rvport-ca sh -eu /run/rvport/cross-toolchain.sh unpack @@UNPACK@@; \
    rm -rf /var/lib/apt/lists/*; \
    sh -eu /run/rvport/cross-toolchain.sh match @@MATCH@@; \
    dpkg-query -W -f '${binary:Package}=${Version}\n' > /rvport-toolchain-packages.txt; \
    cat /rvport-unpacked-packages.txt >> /rvport-toolchain-packages.txt; \
    sh -eu /run/rvport/cross-toolchain.sh compilers @@COMPILERS@@
