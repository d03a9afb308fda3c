" Vim filetype plugin for Mist model descriptions (lang/SPEC.md)
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

" Only line comments: // to the end of the line.
setlocal comments=:// commentstring=//\ %s
setlocal formatoptions-=t formatoptions+=croql

let b:undo_ftplugin = "setlocal comments< commentstring< formatoptions<"
