#!/usr/bin/env bash
# Re-measures the project on a GPU machine that has no network, one or more steps per command, from the
# repository root of a copy of the checkout (no git history there):
#
#   bash experiments/gpu_remeasure.sh COMMIT LABEL STEP[:SECONDS] ...
#
# COMMIT: the commit whose files these are (stamped into the build, so records name the code that ran).
# LABEL: the run folders' prefix (the card, e.g. h100 or h200). Steps, each stopped by SIGINT after its
# SECONDS (its records so far kept, the run resumable; a step whose run folder came with the tree resumes it):
#   all, training, decode, model, fp8, epilogue   tierbench run of that suite (timing=quick, CUDA graphs)
#   normbwd                                       the norm family's backward alone at 16384 rows
#   attnbwd                                       attention's backward alone, bf16, head_dim 128, S 2048-16384
#                                                 (and the grouped-query cases)
#   traffic                                       the norm family at 16384 x 4096 with ncu's DRAM bytes
#   tests=FILE,FILE,...                           pytest -m gpu of those test files (junit XML kept; the
#                                                 scale-out ones need hydra-joblib-launcher installed);
#                                                 TEST_WORKERS=N spreads them over N pytest-xdist workers
#                                                 (their time is mostly Triton compiling, on the CPU cores):
#                                                 for tests/kernels only, as the harness's GPU tests check
#                                                 that no other process shares the GPU. The workers share
#                                                 the card's memory: on an 80 GB H100, 12 ran every kernel
#                                                 test in 124 s but 42 ran out of memory beside the others;
#                                                 4 ran the matmul and norm files without one. With workers,
#                                                 the tests that failed run again in one process (TEST_RERUN
#                                                 seconds, default 180; 0: never), their own junit XML kept:
#                                                 a failure there is the test's, not a neighbour's memory
#   variants=FAMILY,FAMILY,...                    experiments/gpu_variants.py --family FAMILIES (the forced
#                                                 kernel variants against the tuned picks and their peers);
#                                                 its log is results/sweeps/LABEL-variants/FAMILIES.log
#   history=STEP,STEP,...                         experiments/gpu_history.py's steps (aa, plant, ab, gate, slow,
#                                                 history) in a clone of the carried .gitbundle/main.bundle
#                                                 (`git bundle create .gitbundle/main.bundle main` here);
#                                                 asv's results, the noise runs and the reports come back
#                                                 in $OUT/history.tar.gz; GPU_HISTORY_ARGS adds
#                                                 options (e.g. "--at SHA --bench REGEX")
# Everything measured is packed, after every step, into $OUT/results.tar.gz (the run folders and the
# ceilings) with the log in $OUT/log; unpack the tar at the repository root on the machine that commits,
# before the next command: each command starts from the checkout's run folders, so one extended by the last
# command and not unpacked is resumed from its older copy (its newer records measured again).
set -uo pipefail
commit=$1
label=$2
shift 2
out=${OUT:?OUT must name the folder that comes back}

# tierbench as installed from this tree (the package layout of pyproject.toml), stamped with its commit.
build=/tmp/tierbench-build
if [ ! -f "$build/tierbench/BUILD_COMMIT" ]; then
  rm -rf "$build" && mkdir -p "$build/tierbench"
  cp -r core/. "$build/tierbench/"
  cp -r kernels suite conf "$build/tierbench/"
  echo "$commit" > "$build/tierbench/BUILD_COMMIT"
fi
export PYTHONPATH=$build${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

pack() {
  local runs
  runs=$(ls -d results/runs/"$label"-* 2>/dev/null)
  tar -czf "$out/results.tar.gz" results/ceilings $runs results/gpu-tests $(ls -d results/sweeps/"$label"-variants 2>/dev/null) 2>/dev/null
}

tb_run() {  # seconds run_id overrides...
  local seconds=$1 id=$2
  shift 2
  local target=(run_id="$id" "$@" timing=quick compiler.dynamic=true)
  # An interrupted run brought back with the tree: finish it under its saved config.
  [ -f "results/runs/$id/config.yaml" ] && target=(resume="$id")
  echo "== $id: tierbench run ${target[*]} (at most ${seconds}s) $(date -u +%H:%M:%S)"
  # The folder is tierbench's own tree, whose commit the build names; its .git (if the copy has one) may be
  # of an older HEAD, which the records would take for the working folder's commit: hide it.
  GIT_DIR=/nonexistent timeout -s INT -k 30 "$seconds" python3 -m tierbench.suite.cli run "${target[@]}" \
    ceilings_dir=results/ceilings table=false html=false
  echo "== $id: exit $? $(date -u +%H:%M:%S)"
}

mkdir -p results/gpu-tests
for step in "$@"; do
  # The seconds follow the last colon (test node ids have colons of their own).
  name=$step seconds=540
  if [[ ${step##*:} =~ ^[0-9]+$ ]]; then name=${step%:*} seconds=${step##*:}; fi
  case "$name" in
    all) tb_run "$seconds" "$label-all" suite=all ;;
    training) tb_run "$seconds" "$label-training" suite=training ;;
    decode) tb_run "$seconds" "$label-decode" suite=decode ;;
    model) tb_run "$seconds" "$label-model-llama3-8b" suite=model model=llama3-8b ;;
    fp8) tb_run "$seconds" "$label-fp8" suite=matmul 'matmul.dtypes=[fp8_e4m3]' 'matmul.square=[4096,8192]' ;;
    epilogue) tb_run "$seconds" "$label-epilogue" suite=matmul 'matmul.ops=[matmul,matmul_bias_gelu]' ;;
    normbwd) tb_run "$seconds" "$label-norm-bwd" suite=norm 'norm.modes=[bwd]' 'norm.rows=[16384]' ;;
    attnbwd) tb_run "$seconds" "$label-attn-bwd" suite=attention 'attention.modes=[bwd]' 'attention.dtypes=[bf16]' \
      'attention.head_dims=[128]' 'attention.seq_lens=[2048,4096,8192,16384]' ;;
    traffic)
      PATH=$PATH:/usr/local/cuda/bin tb_run "$seconds" "$label-traffic-norm" suite=norm 'metrics=[traffic]' \
        'norm.rows=[16384]' 'norm.hidden=[4096]'
      ;;
    tests=*)
      files=${name#tests=}
      tag=$(date -u +%H%M%S)
      echo "== pytest -m gpu ${files//,/ } (at most ${seconds}s) $(date -u +%H:%M:%S)"
      workers=()
      [ -n "${TEST_WORKERS:-}" ] && workers=(-n "$TEST_WORKERS")
      # shellcheck disable=SC2086
      cache=(-o cache_dir=/tmp/tierbench-pytest-cache)  # pytest's last-failed list, outside the tree
      timeout -s INT -k 30 "$seconds" python3 -m pytest -m gpu -q -rfEs "${cache[@]}" --timeout 240 "${workers[@]}" \
        --junitxml="results/gpu-tests/junit-$tag.xml" ${files//,/ }
      rc=$?
      echo "== pytest: exit $rc $(date -u +%H:%M:%S)"
      rerun=${TEST_RERUN:-180}
      if [ "$rc" = 1 ] && [ ${#workers[@]} -gt 0 ] && [ "$rerun" -gt 0 ]; then
        echo "== pytest: the failures again, one process (at most ${rerun}s) $(date -u +%H:%M:%S)"
        # shellcheck disable=SC2086
        timeout -s INT -k 30 "$rerun" python3 -m pytest -m gpu -q -rfEs "${cache[@]}" --lf --last-failed-no-failures none \
          --timeout 240 --junitxml="results/gpu-tests/junit-$tag-rerun.xml" ${files//,/ }
        echo "== pytest (rerun): exit $? $(date -u +%H:%M:%S)"
      fi
      ;;
    variants=*)
      families=${name#variants=}
      mkdir -p "results/sweeps/$label-variants"
      log="results/sweeps/$label-variants/${families//,/-}.log"
      echo "== gpu_variants.py --family $families (at most ${seconds}s) $(date -u +%H:%M:%S)"
      timeout -s INT -k 30 "$seconds" python3 experiments/gpu_variants.py --family "$families" > "$log" 2>&1
      echo "== gpu_variants: exit $? $(date -u +%H:%M:%S)"
      tail -n 60 "$log"
      ;;
    history=*)
      repo=/tmp/tierbench-repo
      if [ ! -d "$repo/.git" ]; then
        rm -rf "$repo" && git clone -q -b main .gitbundle/main.bundle "$repo" || { echo "== history: no .gitbundle/main.bundle to clone" >&2; continue; }
      fi
      echo "== gpu_history.py --steps ${name#history=} (at most ${seconds}s) $(date -u +%H:%M:%S)"
      # shellcheck disable=SC2086
      (cd "$repo" && timeout -s INT -k 30 "$seconds" python3 experiments/gpu_history.py --steps "${name#history=}" ${GPU_HISTORY_ARGS:-})
      echo "== gpu_history: exit $? $(date -u +%H:%M:%S)"
      tar -czf "$out/history.tar.gz" -C "$repo" results/asv results/noise results/compare 2>/dev/null
      ;;
    *) echo "gpu_remeasure: unknown step $name (valid: all, training, decode, model, fp8, epilogue, normbwd, attnbwd, traffic, tests=FILES, variants=FAMILIES, history=STEPS)" >&2 ;;
  esac
  pack
done
