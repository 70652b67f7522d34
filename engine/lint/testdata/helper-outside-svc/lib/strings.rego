package lib.strings

lower_action := lower(input.action)
