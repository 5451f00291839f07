"""`upgrade --migrations DIR --online`: a migration set applied as it is, every statement
`plan` prices over the lock budget run in an online form proven on a scratch copy to end in
the plain statement's end state.

`choose` picks a statement's forms from PostgreSQL's parse tree; one module per form
(`index`, `not_valid`, `not_null`, `unique`, `rebuild`), each with `run` and `abort`;
`context` is what a form runs its steps through (the runner's ladder and the hook that ends
the statement); `apply` runs a statement's forms resumably; `decide` picks the statements
over the budget; `proof` compares two end states; `upgrade` is the whole path; `bill` is
`plan --online`'s; `abort` undoes the statement in flight."""
