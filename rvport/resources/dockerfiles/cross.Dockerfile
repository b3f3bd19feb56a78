# rvport cross build stage: runs on the build platform (no emulation, no QEMU_CPU) with a riscv64 cross
# toolchain; verified sources in, riscv64 artifacts out, no network. Every compile goes through the
# build-platform base's ccache (rvport/engine/compcache.py). The kind's cross environment
# (rvport/cross.py) comes first, the recipe's env after it, so a recipe may override it.
FROM @@TOOLCHAIN@@ AS build
@@CROSS_ENV@@
@@ENV@@
@@CCACHE_ENV@@
ENV PATH=@@CCACHE_PATH@@/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY tools/ /rvport/tools/
COPY rvport-build.sh /rvport/build.sh
COPY rvport-ccache.sh /rvport/ccache.sh
WORKDIR /src
# `rvport build --no-cache` gives RVPORT_FRESH a new value, so this step runs again while the cache mounts
# keep their content (buildx's own --no-cache would hand them over empty on some engines)
ARG RVPORT_FRESH
RUN @@SRC_MOUNT@@ --mount=type=bind,source=deps,target=/deps,rw \
    @@CCACHE_MOUNT@@--mount=type=cache,id=rvport-go-cross-@@PROFILE@@,target=/root/.cache/go-build \
    @@SRC_COPY@@mkdir -p "$RVPORT_OUT" && sh -eu /rvport/ccache.sh start && sh -eux /rvport/build.sh && sh -eu /rvport/ccache.sh end

FROM scratch AS export
COPY --from=build /out/ /
