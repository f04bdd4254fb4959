"""The rules of the product: versions, labels, templates, keys, pagination."""
