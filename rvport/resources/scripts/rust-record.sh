#!/bin/sh
# The Rust a stage used, written down after the recipe's build commands in every mode (a build command of its
# own: rvport.plan.planner.RUST_RECORD is the line below, as plan.json shows it): the compiler cargo runs
# ($RUSTC where a mode sets it, as accelerated stages do; else rustc on PATH), cargo, and the platform rustc
# runs on. The runner takes the file out of the artifacts into result.json (stages[].rust).
# Environment: RUSTC (optional: the compiler, a command), RVPORT_OUT (the stage's output directory).
{ echo "rustc=$(${RUSTC:-rustc} --version)"; echo "cargo=$(cargo --version)"; echo "host=$(${RUSTC:-rustc} -vV | sed -n 's/^host: //p')"; } > "$RVPORT_OUT/.rvport-rust"
