"""The co-location benchmark (benchmarks/colocate.py), by concept:

  cli      the command line, the dataset, the run
  jobs     the training job processes (a plain loop) and the parent's side of them
  sources  where the jobs' batches come from: synthetic, DataLoader, server, hosted server
  measure  the matrix, each phase's measurements, the repeats of a row
  report   derived figures, the Markdown table, the summary, the plots
"""
