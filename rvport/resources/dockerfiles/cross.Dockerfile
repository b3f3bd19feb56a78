# rvport cross build stage: runs on the build platform (no emulation, no QEMU_CPU) with a riscv64 cross
# toolchain; verified sources in, riscv64 artifacts out, no network. The kind's cross environment
# (rvport/cross.py) comes first, the recipe's env after it, so a recipe may override it.
FROM @@TOOLCHAIN@@ AS build
@@CROSS_ENV@@
@@ENV@@
COPY src/ /src/
COPY deps/ /deps/
COPY tools/ /rvport/tools/
COPY rvport-build.sh /rvport/build.sh
WORKDIR /src
RUN --mount=type=cache,id=rvport-go-cross-@@PROFILE@@,target=/root/.cache/go-build \
    mkdir -p "$RVPORT_OUT" && sh -eux /rvport/build.sh

FROM scratch AS export
COPY --from=build /out/ /
