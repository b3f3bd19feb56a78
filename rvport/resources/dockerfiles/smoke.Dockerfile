# rvport smoke stage: the artifacts installed into a clean riscv64 container (the base plus the smoke test's
# runtime packages), exercised offline with the profile's QEMU CPU. The step itself always succeeds: what the
# test printed and its exit status are exported, and the runner judges them (a failing test is shown and
# recorded with its last lines, not lost in a failed build). No core files: a test that dies (the run without
# V below) would leave a QEMU core of the whole process in the layer.
FROM @@IMAGE@@ AS smoke
ENV QEMU_CPU=@@QEMU_CPU@@ PYTHONDONTWRITEBYTECODE=1 RVPORT_PROFILE=@@PROFILE@@ RVPORT_VLEN=@@VLEN@@
COPY artifacts/ /artifacts/
# the wheels of the stage's dependencies (recipe depends:, deps/<stage>/), installed with its own; may be empty
COPY deps/ /rvport/deps/
COPY rvport-smoke /rvport/smoke
COPY rvport-smoke-install.sh /rvport/smoke-install.sh
# The test may write one JSON object of the checks it made to $RVPORT_SMOKE_REPORT (smokereport.py); the
# runs below get a scratch path instead, so only this run's report is exported.
RUN set -u; ulimit -c 0; cd /tmp; : > /rvport-smoke-report.json; \
    ( export RVPORT_SMOKE_REPORT=/rvport-smoke-report.json; @@INSTALL@@ && @@RUN@@ ) > /rvport-smoke.log 2>&1; \
    rc=$?; cat /rvport-smoke.log; echo "smoke exit status: $rc"; echo "$rc" > /rvport-smoke.status
# `smoke: without_vector:` (the CPU below is not empty): after a passing test, the same test again on a QEMU
# CPU without the vector extension. The status is its exit status (132: SIGILL), "not-run" after a failing
# test, "not-asked", or "not-emulated" when that CPU still shows V in /proc/cpuinfo (a native riscv64 engine
# ignores QEMU_CPU); the log's first line is the ISA that CPU shows.
RUN set -u; ulimit -c 0; cd /tmp; cpu=@@WITHOUT_VECTOR_CPU@@; log=/rvport-smoke-novector.log; \
    st=/rvport-smoke-novector.status; : > "$log"; \
    if [ -z "$cpu" ]; then echo not-asked > "$st"; \
    elif [ "$(cat /rvport-smoke.status)" != 0 ]; then echo not-run > "$st"; \
    else \
      isa=$(QEMU_CPU="$cpu" sed -n 's/^isa[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1); \
      echo "isa: $isa" > "$log"; \
      case "${isa%%_*}" in \
        rv64*v*) echo not-emulated > "$st" ;; \
        *) ( export QEMU_CPU="$cpu" RVPORT_SMOKE_REPORT=/tmp/rvport-smoke-report-novector.json; @@RUN@@ ) \
             >> "$log" 2>&1; rc=$?; \
           cat "$log"; echo "without vector exit status: $rc"; echo "$rc" > "$st" ;; \
      esac; \
    fi

FROM scratch AS export
COPY --from=smoke /rvport-smoke.log /rvport-smoke.status /rvport-smoke-report.json /rvport-smoke-novector.log \
    /rvport-smoke-novector.status /
