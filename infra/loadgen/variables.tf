variable "project_id" {
  description = "Google Cloud project to run the load-generator fleet in (usually the one the visit counter is deployed in)."
  type        = string

  validation {
    # Google's rule for project ids: 6-30 characters, lower case letters, digits, hyphens.
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id: 6-30 lower case letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the fleet's network, Cloud NAT and bucket; also where the invoked_services are (the study used southamerica-east1)."
  type        = string
  default     = "southamerica-east1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region name such as southamerica-east1."
  }
}

variable "zone" {
  description = "Zone of the master and the workers, in region; null means \"REGION-a\"."
  type        = string
  default     = null

  # That the zone is in region is checked where both are known (a precondition in main.tf).
  validation {
    condition     = var.zone == null || can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "zone must be a Google Cloud zone name such as southamerica-east1-a, or null."
  }
}

variable "workers" {
  description = "Number of worker VMs (standalone VMs, each bounded in time: main.tf), each running processes_per_worker Locust worker processes."
  type        = number

  validation {
    condition     = var.workers >= 1 && var.workers <= 100 && floor(var.workers) == var.workers
    error_message = "workers must be a whole number from 1 to 100."
  }
}

variable "worker_machine_type" {
  description = "Machine type of the worker VMs."
  type        = string
  default     = "e2-standard-4"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.worker_machine_type))
    error_message = "worker_machine_type must be a Compute Engine machine type name such as e2-standard-4."
  }
}

variable "master_machine_type" {
  description = "Machine type of the Locust master VM."
  type        = string
  default     = "e2-standard-2"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.master_machine_type))
    error_message = "master_machine_type must be a Compute Engine machine type name such as e2-standard-2."
  }
}

variable "processes_per_worker" {
  description = "Locust worker processes per worker VM (the kit sets it to the VM's vCPUs: one Locust process uses one core)."
  type        = number
  default     = 4

  validation {
    condition     = var.processes_per_worker >= 1 && var.processes_per_worker <= 64 && floor(var.processes_per_worker) == var.processes_per_worker
    error_message = "processes_per_worker must be a whole number from 1 to 64."
  }
}

variable "run_dir" {
  description = <<-EOT
    Local folder the kit staged for this run; every file in it is uploaded to the bucket under
    run/ and copied onto each VM: locust/ (the suite, with node.py), visitkit/ (the modules it
    imports) and run.conf (the Locust configuration file). __pycache__ folders and .pyc files are
    left out. The packages come from this module's lock, requirements.txt, not from run_dir.
  EOT
  type        = string

  validation {
    condition     = alltrue([for f in ["run.conf", "locust/node.py"] : try(fileexists("${var.run_dir}/${f}"), false)])
    error_message = "run_dir must be a folder holding run.conf and locust/node.py."
  }

  # One list of packages: the lock beside this file.
  validation {
    condition     = !try(fileexists("${var.run_dir}/requirements.txt"), false)
    error_message = "run_dir must not hold a requirements.txt: the VMs install infra/loadgen/requirements.txt, the fleet's hashed lock."
  }
}

variable "run_minutes" {
  description = <<-EOT
    The test's planned length in whole minutes, rounded up (the kit passes its load's planned
    length). Every VM is deleted by Compute Engine at the latest boot_minutes + run_minutes + 10
    minutes after it starts, even if the kit and the master are gone. Required: a whole number
    from 1 to 1440 (a day).
  EOT
  type        = number
  default     = null # so that a missing length is refused by the rule below, in words

  validation {
    condition     = try(var.run_minutes >= 1 && var.run_minutes <= 1440 && floor(var.run_minutes) == var.run_minutes, false)
    error_message = "run_minutes must be the test's planned length: a whole number of minutes from 1 to 1440; it bounds how long the VMs live."
  }
}

variable "boot_minutes" {
  description = <<-EOT
    Minutes a VM may take from its start to the test's: boot, install, connect (the kit allows
    15; the master waits 10 for its workers). A worker that finds no master within this many
    minutes ends itself. Also part of every VM's maximum run duration (see run_minutes).
  EOT
  type        = number
  default     = 15

  validation {
    condition     = var.boot_minutes >= 5 && var.boot_minutes <= 60 && floor(var.boot_minutes) == var.boot_minutes
    error_message = "boot_minutes must be a whole number from 5 to 60."
  }
}

variable "master_port" {
  description = "TCP port the Locust master listens on for its workers (Locust's default is 5557)."
  type        = number
  default     = 5557

  validation {
    condition     = var.master_port >= 1024 && var.master_port <= 65535 && floor(var.master_port) == var.master_port
    error_message = "master_port must be a whole number from 1024 to 65535."
  }
}

variable "invoked_services" {
  description = <<-EOT
    Cloud Run services in region (for a 2nd gen function, its deployed name, e.g. "app",
    "get-counter", "inc-counter") whose roles/run.invoker the fleet's service account gets: for a
    visit counter deployed with access = "authenticated". Empty for a public deployment.
  EOT
  type        = list(string)
  default     = []

  validation {
    # Cloud Run's rule for service names: up to 49 lower case letters, digits or hyphens, starting with a letter, not ending with a hyphen.
    condition     = alltrue([for s in var.invoked_services : can(regex("^[a-z]([-a-z0-9]{0,47}[a-z0-9])?$", s))])
    error_message = "Each of invoked_services must be a Cloud Run service name: up to 49 lower case letters, digits or hyphens, starting with a letter."
  }
}

variable "nat_min_ports_per_vm" {
  description = <<-EOT
    Cloud NAT source ports reserved for each VM (static port allocation). Every worker keeps
    thousands of keep-alive connections to ONE Google front end (the same destination IP and
    port), and Cloud NAT needs one source port per connection to the same destination, so this
    caps a worker's open connections. Cloud NAT's rules: the default is 64; with static
    allocation the value need not be a power of two but Google rounds it up to the next one
    (50 reserves 64), so a power of two reserves exactly what it says; dynamic allocation (not
    used here) would require a power of two of at least 32. A NAT IP address has 64,512 ports,
    so 8192 serves 7 VMs per address (Cloud NAT adds addresses by itself: AUTO_ONLY).
    A whole number from 64 to 65536.
  EOT
  type        = number
  default     = 8192

  # Cloud NAT: static allocation rounds up to a power of two (none required); 64 is its default,
  # 65536 its largest allocation (dynamic allocation's maximum).
  validation {
    condition     = var.nat_min_ports_per_vm >= 64 && var.nat_min_ports_per_vm <= 65536 && floor(var.nat_min_ports_per_vm) == var.nat_min_ports_per_vm
    error_message = "nat_min_ports_per_vm must be a whole number from 64 (Cloud NAT's default) to 65536 (its largest port allocation)."
  }
}

variable "billing_account" {
  description = <<-EOT
    Billing account id (XXXXXX-XXXXXX-XXXXXX) of the project: with it, a monthly budget of
    budget_amount on the project alerts the account's billing administrators at 50, 90 and 100 %
    (creating it needs billing.budgets.create on the account). null: no budget.
  EOT
  type        = string
  default     = null

  validation {
    condition     = var.billing_account == null || can(regex("^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$", var.billing_account))
    error_message = "billing_account must be a billing account id such as 012345-6789AB-CDEF01, or null."
  }
}

variable "budget_amount" {
  description = "The monthly budget, in the billing account's currency, when billing_account is set: a whole amount above 0."
  type        = number
  default     = 50

  validation {
    condition     = var.budget_amount > 0 && floor(var.budget_amount) == var.budget_amount
    error_message = "budget_amount must be a whole amount above 0."
  }
}
