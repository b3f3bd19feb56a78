# rvport smoke stage: the artifacts installed into a clean riscv64 container (the base plus the smoke test's
# runtime packages), exercised offline with the profile's QEMU CPU. Its log is exported.
FROM @@IMAGE@@ AS smoke
ENV QEMU_CPU=@@QEMU_CPU@@ PYTHONDONTWRITEBYTECODE=1
COPY artifacts/ /artifacts/
COPY rvport-smoke /rvport/smoke
RUN set -u; cd /tmp; ( @@INSTALL@@ && @@RUN@@ ) > /rvport-smoke.log 2>&1; rc=$?; cat /rvport-smoke.log; \
    echo "smoke exit status: $rc" >> /rvport-smoke.log; exit $rc

FROM scratch AS export
COPY --from=smoke /rvport-smoke.log /
