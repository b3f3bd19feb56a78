#!/bin/sh
# usr/sbin/policy-rc.d of a new root filesystem while its maintainer scripts run (as debootstrap does): no
# service may start (101: action forbidden by policy). Arguments: invoke-rc.d's, ignored.
exit 101
