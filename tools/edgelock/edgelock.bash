# bash completion for edgelock
