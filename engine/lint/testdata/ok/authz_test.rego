package not_linted

# Test files are skipped, as the loader skips them.
x := 1
