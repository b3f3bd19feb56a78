# A fragment of toolchain.Dockerfile (its comment lines left out there), not a whole
# Dockerfile: one apt install of the packages given. The user's CA
# bundle, when given, is mounted as a secret so TLS-intercepting proxies work without turning verification
# off (a secret is no part of the step's cache key). No translated package descriptions are fetched
# (Acquire::Languages=none): nothing here reads them, and under QEMU apt parses every list it has.
RUN --mount=type=secret,id=rvport-ca \
    set -eu; \
    if [ -s /run/secrets/rvport-ca ]; then ca="-o Acquire::https::CAInfo=/run/secrets/rvport-ca"; else ca=""; fi; \
    apt-get $ca -o Acquire::Languages=none update; \
    apt-get $ca install -y --no-install-recommends @@PACKAGES@@; \
    rm -rf /var/lib/apt/lists/*
