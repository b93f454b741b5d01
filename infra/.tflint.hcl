# Only tflint's bundled Terraform rules: the Google ruleset plugin cannot be
# downloaded offline. "all" adds naming, documentation, typing and
# unused-declaration rules to the recommended ones.
plugin "terraform" {
  enabled = true
  preset  = "all"
}
