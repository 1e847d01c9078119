"""From cell files to answers: aggregation, speedups with intervals, crossovers, the
precision and scaling dimensions, findings, and comparing two result sets."""
