"""Every statistical statement docaudit prints, in one place: conformal p-values, Benjamini–Hochberg q-values, the
rule that turns p-values and reasons into verdicts, and the significance level they share (docs/methods.md)."""
