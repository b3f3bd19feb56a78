# rvport serving check's environment image (rvport/closure/serveenv.py): the serving check's image plus the
# venv its install step makes, holding every wheel of the wheelhouse but the recipe's own, installed offline
# and by sha256 as that step installs them, owned by the user the check's container runs as. The check's
# install step then runs pip on the whole requirements.txt in it: only the recipe's own wheel is left to
# install. Its build has no network; the wheels and their requirements are this image's build context.
FROM @@BASE@@
USER @@USER@@
RUN --mount=type=bind,source=.,target=/rvport-env \
    HOME=/tmp python3 -m venv --system-site-packages @@VENV@@ \
 && HOME=/tmp @@VENV@@/bin/python -m pip install --no-cache-dir --no-index --find-links /rvport-env/wheels \
      --require-hashes -r /rvport-env/requirements.txt
