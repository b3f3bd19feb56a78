#!/bin/sh
# rvport: the recipe's build commands, run with sh -eux in /src
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(find /src -type f -printf '%T@\n' | sort -n | tail -n 1 | cut -d. -f1)
  export SOURCE_DATE_EPOCH
fi
