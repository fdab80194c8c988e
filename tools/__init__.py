"""Developer tools: render every stack, summarise a change, refresh the golden snapshots."""
