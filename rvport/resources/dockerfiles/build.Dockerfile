# rvport build stage (native or emulated riscv64): verified sources in, artifacts out, no network.
# Run as its own `docker buildx build --network none`; compiler caches are BuildKit cache mounts keyed by
# profile. QEMU_CPU (from the profile) makes every emulated process, /proc/cpuinfo included, see exactly the
# profile's ISA; under QEMU the stage checks that first (/rvport/cpuinfo.sh).
FROM @@TOOLCHAIN@@ AS build
@@ENV@@
ENV PATH=/usr/lib/ccache:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CCACHE_DIR=/root/.ccache
COPY src/ /src/
COPY deps/ /deps/
COPY tools/ /rvport/tools/
COPY rvport-build.sh /rvport/build.sh
COPY rvport-cpuinfo.sh /rvport/cpuinfo.sh
WORKDIR /src
RUN --mount=type=cache,id=rvport-ccache-@@PROFILE@@,target=/root/.ccache \
    --mount=type=cache,id=rvport-go-@@PROFILE@@,target=/root/.cache/go-build \
    @@CPUINFO_CHECK@@mkdir -p "$RVPORT_OUT" && sh -eux /rvport/build.sh

FROM scratch AS export
COPY --from=build /out/ /
