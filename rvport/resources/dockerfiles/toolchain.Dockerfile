# rvport toolchain stage: the base image plus the Debian packages a recipe (or its smoke test) needs.
# The only stage kind that reaches the network (apt). The user's CA bundle, when given, is mounted as a
# secret so TLS-intercepting proxies work without turning verification off. No translated package descriptions
# are fetched (Acquire::Languages=none): nothing here reads them, and under QEMU apt parses every list it has.
FROM @@BASE@@
ENV DEBIAN_FRONTEND=noninteractive QEMU_CPU=@@QEMU_CPU@@
RUN --mount=type=secret,id=rvport-ca \
    set -eu; \
    if [ -s /run/secrets/rvport-ca ]; then ca="-o Acquire::https::CAInfo=/run/secrets/rvport-ca"; else ca=""; fi; \
    apt-get $ca -o Acquire::Languages=none update; \
    apt-get $ca install -y --no-install-recommends @@PACKAGES@@; \
    rm -rf /var/lib/apt/lists/*; \
    dpkg-query -W -f '${Package}=${Version}\n' > /rvport-toolchain-packages.txt
