"""Speed: time and memory of the filter beside what a user would pick instead."""
