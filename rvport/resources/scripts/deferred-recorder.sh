#!/bin/sh
# A deferred program's stand-in while dpkg configures a new root filesystem (rvport.build.bootstrap.Deferred):
# instead of running, it writes its call down, one line a call: "call", then each argument, each followed by a
# tab (empty arguments survive). The real program runs once afterwards for all of them.
# Arguments: the caller's. The record's path, its one parameter of its own, is written in when it is put in
# place (@@RECORD@@), as its callers give it neither arguments nor environment of rvport's.
{ printf 'call\t'; for a in "$@"; do printf '%s\t' "$a"; done; echo; } >> "@@RECORD@@"
