"""GenericJob."""
