"""Documents: reading files, cleaning boilerplate, labelled sets, manifests and the book fetcher."""
