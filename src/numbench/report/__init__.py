"""What a person reads: the Markdown/HTML summary, its tables, and the Altair charts."""
