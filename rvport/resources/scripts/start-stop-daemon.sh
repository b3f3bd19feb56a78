#!/bin/sh
# sbin/start-stop-daemon of a new root filesystem while its maintainer scripts run (as debootstrap does): it
# starts and stops nothing. Arguments: the caller's, ignored.
echo
echo "Warning: Fake start-stop-daemon called, doing nothing"
