"""The latency load generator behind ``python -m loadtest`` (no subcommand).

* :mod:`~loadtest.load.hdr`: HDR latency histograms that merge across processes;
* :mod:`~loadtest.load.scenarios`: what one request of each scenario does, per arm (the Flight
  server, our engine in-process, pylance in-process);
* :mod:`~loadtest.load.generator`: open-loop (fixed arrival rate, latency from the intended send
  time) and closed-loop (max throughput) drivers inside one client process;
* :mod:`~loadtest.load.pool`: the client processes (Python Flight calls hold the GIL) and the merge
  of their results;
* :mod:`~loadtest.load.server`: starting ``lance-flight serve`` and scraping its ``/metrics``;
* :mod:`~loadtest.load.report` / :mod:`~loadtest.load.plots`: ``report.json``, the Markdown/HTML
  page, the SVG plots and the summary table;
* :mod:`~loadtest.load.suite`: the suites (``--quick`` and the default) and the command line.
"""
