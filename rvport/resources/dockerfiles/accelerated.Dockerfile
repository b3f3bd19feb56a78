# rvport accelerated build stage: a riscv64 stage (Python, pip, CMake, make and build backends run as riscv64
# under QEMU with the profile's QEMU_CPU, which /rvport/cpuinfo.sh checks first) whose C and C++ compilers
# are native @@XTC_PLATFORM@@ cross compilers targeting riscv64, taken from the pinned prefix image
# @@XTC_IMAGE@@. They compile against the stage's own headers and libraries, and setup.sh refuses a GCC
# version other than the stage's. Rust stages also get the build platform's rustc (RUSTC, CARGO_BUILD_TARGET)
# with the stage's riscv64 standard library.
# Run as its own `docker buildx build --network none`. Every compile goes through the prefix's ccache, a native
# @@XTC_PLATFORM@@ program beside the cross compilers (rvport/engine/compcache.py, resources/scripts/ccache.sh).
FROM @@TOOLCHAIN@@ AS build
@@ENV@@
COPY --from=@@XTC_IMAGE@@ /opt/xtc/ /opt/xtc/
RUN sh -eu /opt/xtc/setup.sh
@@CCACHE_ENV@@
ENV PATH=@@CCACHE_PATH@@/opt/xtc/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin RVPORT_ACCELERATED=@@XTC_PLATFORM@@
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
    @@CPUINFO_CHECK@@@@SRC_COPY@@. /opt/xtc/stage.env && mkdir -p "$RVPORT_OUT" && sh -eu /rvport/ccache.sh start && sh -eux /rvport/build.sh && sh -eu /opt/xtc/setup.sh after-build && sh -eu /rvport/ccache.sh end

FROM scratch AS export
COPY --from=build /out/ /
