"""A recipe's runtime closure: the lock's resolver (`rvport lock`, resolve.py) and the wheelhouse made from a
lock (`rvport wheelhouse`, wheelhouse.py). The lock itself, as the catalogue holds and checks it, is
rvport.catalogue.closure_lock; this package sits above the catalogue, sources, build (Debian pins) and
verify."""
