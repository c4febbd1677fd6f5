# bash completion for sessiontool
_sessiontool_completion() {
    local IFS=$'\n'
    local line="${COMP_LINE:0:COMP_POINT}"
    local -a words
    IFS=$' \t\n' read -r -a words <<< "$line"
    local cword=${#words[@]}
    if [[ -n "$line" && "$line" != *[[:space:]] ]]; then
        cword=$((cword - 1))
    fi
    local cur="${words[cword]}"
    COMPREPLY=( $( env COMP_WORDS="$line" \
                   COMP_CWORD=$cword \
                   _SESSIONTOOL_COMPLETE=complete_bash "$1" 2>/dev/null ) )
    if [[ "$cur" == *:* && "$COMP_WORDBREAKS" == *:* ]]; then
        local prefix="${cur%"${cur##*:}"}"
        local i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]="${COMPREPLY[i]#"$prefix"}"
        done
    fi
    return 0
}

complete -o default -F _sessiontool_completion sessiontool
