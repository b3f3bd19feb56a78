# rvport upstream tests (a recipe's `tests:`): after the smoke test, in a clean container of the same smoke
# image, the stage's wheels, its dependencies' wheels and the pinned test wheels installed offline, then one
# pytest run per test file from the source tree's paths, on the profile's QEMU CPU. The step itself always
# succeeds: each run's exit status and per-test records, and the log, are exported, and the runner judges them.
FROM @@IMAGE@@ AS tests
ENV QEMU_CPU=@@QEMU_CPU@@ PYTHONDONTWRITEBYTECODE=1 RVPORT_PROFILE=@@PROFILE@@ RVPORT_VLEN=@@VLEN@@
COPY artifacts/ /artifacts/
COPY deps/ /rvport/deps/
COPY test-wheels/ /rvport/test-wheels/
COPY tree/ /rvport/tree/
COPY rvport_pytest_record.py /rvport/plugin/rvport_pytest_record.py
COPY rvport-smoke-install.sh /rvport/smoke-install.sh
COPY rvport-tests.sh /rvport/tests.sh
RUN set -u; ulimit -c 0; mkdir -p /rvport-tests; sh /rvport/tests.sh > /rvport-tests/log 2>&1; rc=$?; \
    tail -n 200 /rvport-tests/log; echo "tests exit status: $rc"; echo "$rc" > /rvport-tests/status

FROM scratch AS export
COPY --from=tests /rvport-tests/ /
