# rvport toolchain stage: the base image plus the Debian packages a recipe (or its smoke test) needs.
# The only stage kind that reaches the network (apt). Below, one RUN of toolchain-install.Dockerfile
# per shared layer the list names (rvport/resources/layers.yaml: e.g. Debian's torch, first and alone, so
# that images of this base with the same entries share it in the build cache), then one for the rest.
FROM @@BASE@@
ENV DEBIAN_FRONTEND=noninteractive QEMU_CPU=@@QEMU_CPU@@
@@INSTALLS@@
RUN dpkg-query -W -f '${Package}=${Version}\n' > /rvport-toolchain-packages.txt
