"""The document-level meta-classifier of Meeus et al.: normalization, features, random forest."""
