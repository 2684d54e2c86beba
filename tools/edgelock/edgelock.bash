# bash completion for edgelock(1). Installed as
# share/bash-completion/completions/edgelock; the cli_install test checks
# that it offers every long option of `edgelock --help`.

_edgelock() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local subcommands="run acquire release extend status semaphore cooldown"
    local common="--url --ttl --wait --server-wait --wait-replicas --replica-timeout --tls-ca
        --tls-cert --tls-key --tls-server-name --json --stats --quiet --help --version"
    local lock_opts="--fair --waiter-timeout"
    local i word sub="" dashdash=0
    for ((i = 1; i < cword; i++)); do
        word=${words[i]}
        if [[ $word == -- ]]; then
            dashdash=$i
            break
        fi
        if [[ -z $sub && " $subcommands " == *" $word "* ]]; then
            sub=$word
        fi
    done

    # After "--": COMMAND and its arguments.
    if ((dashdash > 0)); then
        if ((cword == dashdash + 1)); then
            COMPREPLY=($(compgen -c -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return
    fi

    case $prev in
        -u | --url)
            COMPREPLY=($(compgen -W "redis:// rediss:// unix:// redis-sentinel:// redis-cluster://" -- "$cur"))
            compopt -o nospace 2>/dev/null
            return
            ;;
        -w | --wait)
            COMPREPLY=($(compgen -W "0 forever" -- "$cur"))
            return
            ;;
        --tls-ca | --tls-cert | --tls-key)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        -t | --ttl | --server-wait | --grace | --wait-replicas | --replica-timeout | \
            --tls-server-name | --permits | --release | --period | --quota | --window | \
            --waiter-timeout | -E | --conflict-exit-code)
            return
            ;;
    esac

    local opts=$common
    case $sub in
        "") opts+=" $lock_opts" ;;
        run) opts+=" --grace --conflict-exit-code $lock_opts" ;;
        acquire | release | extend | status) opts+=" $lock_opts" ;;
        semaphore) opts+=" --permits --count --release --grace --conflict-exit-code" ;;
        cooldown) opts+=" --period --quota --window --peek --reset --conflict-exit-code" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ -z $sub ]]; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
    fi
} && complete -F _edgelock edgelock
