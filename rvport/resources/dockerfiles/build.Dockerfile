# rvport build stage (native or emulated riscv64): verified sources in, artifacts out, no network.
# Run as its own `docker buildx build --network none`. Every compile goes through ccache (the riscv64 base's;
# rvport/engine/compcache.py, resources/scripts/ccache.sh), keyed by the compiler, every flag and the profile;
# Go's build cache is a BuildKit cache mount per profile. QEMU_CPU (from the profile) makes every emulated
# process, /proc/cpuinfo included, see exactly the
# profile's ISA; under QEMU the stage checks that first (/rvport/cpuinfo.sh).
FROM @@TOOLCHAIN@@ AS build
@@ENV@@
@@CCACHE_ENV@@
ENV PATH=@@CCACHE_PATH@@/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY tools/ /rvport/tools/
COPY rvport-build.sh /rvport/build.sh
COPY rvport-cpuinfo.sh /rvport/cpuinfo.sh
COPY rvport-ccache.sh /rvport/ccache.sh
WORKDIR /src
# `rvport build --no-cache` gives RVPORT_FRESH a new value, so this step runs again while the cache mounts
# keep their content (buildx's own --no-cache would hand them over empty on some engines)
ARG RVPORT_FRESH
RUN @@SRC_MOUNT@@ --mount=type=bind,source=deps,target=/deps,rw \
    @@CCACHE_MOUNT@@--mount=type=cache,id=rvport-go-@@PROFILE@@,target=/root/.cache/go-build \
    @@CPUINFO_CHECK@@@@SRC_COPY@@mkdir -p "$RVPORT_OUT" && sh -eu /rvport/ccache.sh start && sh -eux /rvport/build.sh && sh -eu /rvport/ccache.sh end

FROM scratch AS export
COPY --from=build /out/ /
