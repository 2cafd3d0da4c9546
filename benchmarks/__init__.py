"""kernelscale's benchmarks: the papers' tables, the studies behind the defaults, performance
measurements and the maintainers' tools, run from the repository's root:

    python -m benchmarks --list              # every script, by folder, with its first docstring line
    python -m benchmarks NAME [ARGS ...]     # run one: slkl, dsg-stream, refactor_check, ...
    python -m benchmarks.papers.slkl [ARGS]  # the same, by module
    kernelscale bench NAME [--quick]         # a suite, through the installed command

What is where:

- ``harness.py``: timing, peak memory, result records (``Suite`` -> ``results/<suite>.json``),
  tables and plots, the scores the studies share (``task_error``, ``error_ratio``), and finding and
  loading the scripts below (``scripts``, ``find_script``, ``load_suite``);
- ``peers.py``: scikit-learn, LIBSVM, LIBLINEAR and Vowpal Wabbit behind one ``Peer`` interface;
- ``papers/``: each paper's tables reproduced beside the published numbers and the peers (SLKL,
  doubly stochastic gradients and their MNIST8M stream, fixed point, LS-SVM, least squares);
- ``studies/``: how the defaults were chosen, on training data only (the "auto" rules of DSG and
  SLKL, robustness on data nobody tuned for), with ``common.py`` (their shared data sets and
  peers) and the notes of each method family (``*.md``: profiles, timings, tuning history);
- ``perf/``: speed, memory, scale and GPU (kernel products, predictions, Dask, out of core,
  refactor speed);
- ``tools/``: refactor_check (same outputs across a refactor), the fuzz campaigns, the README's
  results table (report), plots, the GPU run (gpu_run.sh) and the import graph;
- ``results/``: the committed JSON results and plots, at the same paths whatever the script's folder.

A suite is a module with ``SUITE = "<name>"`` and ``run(quick=False, out_dir=None)``; every
script has ``main(argv=None)``. See README.md in this folder.
"""
