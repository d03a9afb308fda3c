" Mist model descriptions (lang/SPEC.md)
autocmd BufRead,BufNewFile *.mist setfiletype mist
