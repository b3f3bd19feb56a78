"""A Python module's stand-in while dpkg configures a new root filesystem (bootstrap.DeferredModule).

Run as a script by its path, with file names for arguments, it writes the whole command line down
(interpreter, options, module, files: sys.orig_argv), one line a call: "call", then each word, each followed
by a tab. Imported, or run otherwise (`-m py_compile -`, reading names from its input), it is the real module,
the file beside it named <module>.rvport-real. The record's path, its one parameter of its own, is written in
when it is put in place (@@RECORD@@), as its callers give it neither arguments nor environment of rvport's.
"""

import sys

_rvport_args = sys.orig_argv[sys.orig_argv.index(__file__) + 1 :] if __file__ in sys.orig_argv[1:] else []
if __name__ == "__main__" and _rvport_args and "-" not in _rvport_args:
    with open("@@RECORD@@", "a") as f:
        f.write("call\t" + "".join(a + "\t" for a in sys.orig_argv) + "\n")
else:
    exec(compile(open(__file__ + ".rvport-real", "rb").read(), __file__, "exec"))
