# Test helper: reads the iteration settings files, so that run blocks can pass
# their values as variables (OpenTofu does not allow functions there).
terraform {
  required_version = ">= 1.7"
}

variable "iterations" {
  description = "Iteration numbers whose iterations/iteration-N/settings.tfvars.json to read."
  type        = list(number)
  default     = [0, 1, 2, 3, 4, 5, 6]
}

output "iterations" {
  description = "Each iteration's settings, keyed by its number as a string."
  value       = { for n in var.iterations : tostring(n) => jsondecode(file("${path.module}/../../../iterations/iteration-${n}/settings.tfvars.json")) }
}

variable "fixtures" {
  description = "Names of settings files in this folder (NAME.tfvars.json) to read, e.g. iteration-7-pull."
  type        = list(string)
  default     = []
}

output "fixtures" {
  description = "Each fixture's settings, keyed by its name."
  value       = { for name in var.fixtures : name => jsondecode(file("${path.module}/${name}.tfvars.json")) }
}
