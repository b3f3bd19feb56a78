# rvport smoke stage: the artifacts installed into a clean riscv64 container (the base plus the smoke test's
# runtime packages), exercised offline with the profile's QEMU CPU. The step itself always succeeds: what the
# test printed and its exit status are exported, and the runner judges them (a failing test is shown and
# recorded with its last lines, not lost in a failed build).
FROM @@IMAGE@@ AS smoke
ENV QEMU_CPU=@@QEMU_CPU@@ PYTHONDONTWRITEBYTECODE=1
COPY artifacts/ /artifacts/
COPY rvport-smoke /rvport/smoke
COPY rvport-smoke-install.sh /rvport/smoke-install.sh
RUN set -u; cd /tmp; ( @@INSTALL@@ && @@RUN@@ ) > /rvport-smoke.log 2>&1; rc=$?; cat /rvport-smoke.log; \
    echo "smoke exit status: $rc"; echo "$rc" > /rvport-smoke.status

FROM scratch AS export
COPY --from=smoke /rvport-smoke.log /rvport-smoke.status /
