" Vim syntax file
" Language:     Mist model descriptions (*.mist), the input language of mistc
" Reference:    lang/SPEC.md, section 2 (lexical grammar) and section 11 (built-ins)
" Install:      see lang/editors/README.md
"
" Built-in op names, shard words, train keys and optimizer names are ordinary
" identifiers in the language (`vocab` is also a size parameter of every stdlib
" model, `dropout` a parameter of the GPT blocks), so they are highlighted only
" where the compiler reads them as such: ops in call position, the words as the
" value of `shard =`, keys and optimizers inside `train { ... }`.

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn case match
" Identifiers are [A-Za-z_][A-Za-z0-9_]*, ASCII only.
syn iskeyword a-z,A-Z,48-57,_

" Items defined later win when several matches start at the same column, so the
" catch-all error comes first and comments come last.

" Characters the lexer rejects (#, $, non-ASCII, ...) and the IR-only % ^ ? . @
syn match   mistError       '[^ \t\r\n\x0b\x0cA-Za-z0-9_"(){}[\],:;=+*/-]'

syn match   mistOperator    '[=+*/-]'
syn match   mistDelimiter   '[(){}[\],:;]'

" Tokens the shared lexer makes only for the textual IR: ==, %name, @name.
syn match   mistError       '=='
syn match   mistError       '[%@][A-Za-z0-9_][A-Za-z0-9_.]*'

" Numbers have no sign; 1. is 1 then '.', 2e is 2 then the identifier e.
syn match   mistNumber      '\<\d\+'
syn match   mistFloat       '\<\d\+\%(\.\d\+\%([eE][+-]\=\d\+\)\=\|[eE][+-]\=\d\+\)'

" Built-in operations (frontend/Builtins.cpp), only when called.
syn match   mistBuiltin     '\<\%(attention\|concat\|cross_entropy\|dropout\|embedding\|gelu\|layernorm\|linear\|lm_head\|position_embedding\|rmsnorm\|rope\|silu\|slice\)\>\%(\s*(\)\@='

" shard = column | row | vocab | none (the word may be on a later line).
syn match   mistShardArg    '\<shard\s*=\%(=\)\@!\%(\_s\|//.*\n\)*\%(column\|row\|vocab\|none\)\>' transparent contains=mistShardWord,mistOperator,mistComment
syn match   mistShardWord   '\<\%(column\|row\|vocab\|none\)\>' contained

" Strings: no escapes, no newline; an unclosed one is an error.
syn match   mistStringError '"[^"\n]*'
syn match   mistString      '"[^"\n]*"'

" Reserved words (SPEC section 2).
syn keyword mistInclude     import
syn keyword mistKeyword     block nextgroup=mistBlockName skipwhite
syn keyword mistKeyword     model nextgroup=mistModelName skipwhite
syn keyword mistKeyword     input nextgroup=mistInputName skipwhite
syn keyword mistSection     pre repeat post
syn keyword mistSection     train nextgroup=mistTrainBody skipwhite skipnl skipempty
syn keyword mistReturn      return
syn keyword mistBoolean     true false

" Element types and the built-in dimensions b (micro-batch) and s (sequence).
syn keyword mistType        bf16 f16 f32 i32 u8
syn keyword mistDimension   b s

syn match   mistBlockName   '\h\w*' contained
syn match   mistModelName   '\h\w*' contained
syn match   mistInputName   '\h\w*' contained

" train { ... }: settings, optimizer settings and optimizer names.
syn cluster mistTrainItems  contains=mistError,mistOperator,mistDelimiter,mistNumber,mistFloat,mistBuiltin,mistShardArg,mistStringError,mistString,mistInclude,mistKeyword,mistSection,mistReturn,mistBoolean,mistType,mistDimension,mistComment,mistTrainKey,mistOptimizer
syn region  mistTrainBody   matchgroup=mistDelimiter start='{' end='}' contained transparent contains=@mistTrainItems
syn keyword mistTrainKey    contained global_batch seq_len warmup_steps lr_decay min_lr decay_fraction lr grad_clip dtype master_dtype grad_dtype optimizer cluster
syn keyword mistTrainKey    contained betas weight_decay wd eps no_decay
syn keyword mistOptimizer   contained adamw sgd

" Comments: // to the end of the line, no block comments.
syn keyword mistTodo        contained TODO FIXME XXX NOTE
syn match   mistComment     '//.*' contains=mistTodo,@Spell

syn sync fromstart

hi def link mistComment     Comment
hi def link mistTodo        Todo
hi def link mistInclude     Include
hi def link mistKeyword     Keyword
hi def link mistSection     Keyword
hi def link mistReturn      Keyword
hi def link mistBoolean     Boolean
hi def link mistBuiltin     Function
hi def link mistShardWord   Constant
hi def link mistType        Type
hi def link mistDimension   Special
hi def link mistBlockName   Function
hi def link mistModelName   Type
hi def link mistInputName   Identifier
hi def link mistTrainKey    Identifier
hi def link mistOptimizer   Function
hi def link mistString      String
hi def link mistStringError Error
hi def link mistNumber      Number
hi def link mistFloat       Float
hi def link mistOperator    Operator
hi def link mistDelimiter   Delimiter
hi def link mistError       Error

let b:current_syntax = "mist"

let &cpo = s:cpo_save
unlet s:cpo_save
