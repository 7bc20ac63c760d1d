#!/usr/bin/env bash
# `make lock`: requirements.txt (everything, exact) from requirements.in, and
# binder/requirements.txt (what the chapters import, at the same versions) from
# binder/requirements.in, with pip-compile (pip-tools, pinned in requirements.txt). Pins
# already in an output file are kept: to move one, edit requirements.in or run
# `make lock LOCK_ARGS="-P NAME"` (--upgrade-package). torch is resolved from TORCH_INDEX
# when it answers (the CPU build, whose dependencies name no nvidia-* package) and written
# without its +cpu tag. Environment: TORCH_INDEX, TORCH_CPU_INDEX, LOCK_ARGS and PROBE_PY
# (set by the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
lock_compile() {
    CUSTOM_COMPILE_COMMAND="make lock" .venv/bin/pip-compile --quiet --no-emit-index-url \
        --no-emit-find-links --strip-extras --annotation-style=line ${LOCK_ARGS:-} "$@"
}
torch_opts=  # PROBE_PY (the Makefile's) fails when TORCH_INDEX does not answer
if [ -n "$TORCH_INDEX" ] && .venv/bin/python -c "$PROBE_PY" "$TORCH_INDEX" 2>/dev/null; then
    torch_opts="--extra-index-url $TORCH_INDEX"
fi
sed -i.bak '/^--extra-index-url/d' binder/requirements.txt && rm -f binder/requirements.txt.bak
set -x
lock_compile $torch_opts --output-file requirements.txt requirements.in
lock_compile $torch_opts --output-file binder/requirements.txt binder/requirements.in
{ set +x; } 2>/dev/null
for f in requirements.txt binder/requirements.txt; do
    sed -i.bak -E -e 's/^(torch==[^ +]+)\+cpu /\1     /' \
        -e 's/^(torch==[^ +]+)\+cpu$/\1/' -e 's/ -c (binder\/\.\.\/)?requirements\.txt,//' \
        "$f" && rm -f "$f.bak"
    if grep -q '^nvidia-' "$f"; then
        echo "lock: $f names nvidia-* packages (torch's CUDA build): run make lock" \
            "where TORCH_INDEX=$TORCH_INDEX answers" >&2
        exit 1
    fi
done
{
    echo '# Binder (repo2docker) installs this file, made by `make lock` from'
    echo "# binder/requirements.in: the runtime pins of ../requirements.txt only. PyTorch's"
    echo '# CPU index gives Binder the CPU build of torch (+cpu sorts after the plain version).'
    echo "--extra-index-url $TORCH_CPU_INDEX"
    cat binder/requirements.txt
} > binder/requirements.txt.new
mv binder/requirements.txt.new binder/requirements.txt
