"""What a command prints and writes for people to read.

- :mod:`~bench.report.text`: the plan report in the terminal (numbers, formulas, findings) and the
  dominant phase of a T_total.
- :mod:`~bench.report.publish`: the common tail of a measuring command (artifact written, plot, printed).
- :mod:`~bench.report.plots`: the PNG plots (ladder, phase waterfall, simulation).
- :mod:`~bench.report.html`: the demo's one-page HTML report; :mod:`~bench.report.tuned` its
  tuned-plan section; :mod:`~bench.report.markup` the HTML table both use.
"""
