# rvport cross toolchain stage: the build-platform base (debian-trixie-xtc, GCC 14 for riscv64) plus the
# Debian packages of a kind's riscv64 cross toolchain (rvport/cross.py) and the recipe's own build tools.
# riscv64 is added as a foreign dpkg architecture first, for Multi-Arch: same libraries such as
# libstd-rust-dev:riscv64; a package that must be unpacked instead (kinds.CrossToolchain.unpack) is downloaded
# and its one directory unpacked, its version added to the image's package list.
# Reaches the network (apt) like every toolchain stage; the CA bundle is a secret.
FROM @@BASE@@
ENV DEBIAN_FRONTEND=noninteractive
RUN --mount=type=secret,id=rvport-ca \
    set -eu; \
    if [ -s /run/secrets/rvport-ca ]; then ca="-o Acquire::https::CAInfo=/run/secrets/rvport-ca"; else ca=""; fi; \
    dpkg --add-architecture @@FOREIGN_ARCH@@; \
    apt-get $ca -o Acquire::Languages=none update; \
    apt-get $ca install -y --no-install-recommends @@PACKAGES@@; \
    @@UNPACK@@; \
    rm -rf /var/lib/apt/lists/*; \
    @@SAME_VERSION@@; \
    dpkg-query -W -f '${binary:Package}=${Version}\n' > /rvport-toolchain-packages.txt; \
    cat /rvport-unpacked-packages.txt >> /rvport-toolchain-packages.txt; \
    @@VERSIONS@@
