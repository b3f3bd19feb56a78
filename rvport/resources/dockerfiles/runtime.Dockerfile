# rvport runtime image: a recipe's artifacts and pinned files (configuration, start script) on the riscv64
# base plus its runtime packages. The files belong to root, so the non-root user it runs as cannot change
# them; it is meant to run with the plan's run_args (read-only root filesystem, tmpfs for what must be
# written, no capabilities). Tagged rvport/<recipe>:<--tag>.
FROM @@IMAGE@@
RUN groupadd --system --gid @@UID@@ @@USER@@ && \
    useradd --system --uid @@UID@@ --gid @@UID@@ --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin @@USER@@
@@COPIES@@
@@ENV@@
WORKDIR @@WORKDIR@@
USER @@UID@@:@@UID@@
@@EXPOSE@@
LABEL org.rvport.recipe="@@RECIPE@@" org.rvport.runtime.key="@@KEY@@"
ENTRYPOINT @@ENTRYPOINT@@
