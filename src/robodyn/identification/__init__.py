"""Parameter identification: measured data, excitation design and estimators (issue 11)."""
