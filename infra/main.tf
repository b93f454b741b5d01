locals {
  # functions/catalogue.json is shared with the Python side (the functions and the local
  # stack): the pages, each function's entry point, Cloud Run service name and whether it is
  # public, and the Firestore names. Terraform takes the deployed names from it.
  catalogue = jsondecode(file("${path.module}/../functions/catalogue.json"))

  # Deployed names make https://REGION-PROJECT.cloudfunctions.net/NAME route like the
  # local stack: /app (serve-page), /get-counter, /inc-counter.
  deployed_names = { for key, f in local.catalogue.functions : key => f.service }
  entry_points   = { for key, f in local.catalogue.functions : key => f.entry_point }
  # store-inc-counter is reached only through the push subscription.
  public_functions = toset([for key, f in local.catalogue.functions : key if f.public])

  base_url = "https://${var.region}-${var.project_id}.cloudfunctions.net"

  # edge_protection puts a load balancer in front of the public functions (edge.tf): visitors then
  # reach them on its address, over HTTPS on edge_protection.domain when set, plain HTTP otherwise.
  edge       = var.edge_protection.enabled
  edge_https = local.edge && var.edge_protection.domain != ""
  public_base_url = !local.edge ? local.base_url : (
    local.edge_https ? "https://${var.edge_protection.domain}" : "http://${one(google_compute_global_address.edge[*].address)}"
  )

  # Known before anything exists, so serve-page can point at its siblings
  # without a dependency on their resources (the same for_each block); behind the load balancer,
  # its address (which depends on no function).
  function_urls = { for key, name in local.deployed_names : key => "${local.public_base_url}/${name}" }

  # The four functions deploy one source zip of functions/ (main.py imports each entry point from
  # its own module: serve_page.py, get_counter.py, inc_counter.py, store_inc_counter.py) and share
  # one environment, but for THREADS, the public functions' CORS_ALLOWED_ORIGINS and serve-page's
  # PAGE_IDLE_SECONDS (below).
  environment = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    PUBSUB_TOPIC         = google_pubsub_topic.visits.name
    SHARDS_PER_PAGE      = tostring(var.shards_per_page)
    CACHE_TTL_SECONDS    = tostring(var.cache_ttl_seconds)
    MARKER_TTL_DAYS      = tostring(var.marker_ttl_days)
    INC_COUNTER_URL      = local.function_urls["inc-counter"]
    GET_COUNTER_URL      = local.function_urls["get-counter"]
    STORE_MODE           = var.store_mode
    PAGE_EMBEDS_COUNT    = var.page_embeds_count ? "1" : "0"
  }

  # The public functions also get CORS_ALLOWED_ORIGINS: the other sites whose pages may call
  # them, comma-separated ("" for none), which the functions' CORS handling reads.
  public_environment = { CORS_ALLOWED_ORIGINS = join(",", var.cors_allowed_origins) }

  # serve-page (the catalogue's "page" role) alone also gets PAGE_IDLE_SECONDS: how long a page nobody
  # touches keeps re-reading its count (0: for ever). It reads every max(its refresh, CACHE_TTL_SECONDS),
  # so CACHE_TTL_SECONDS above matters to it too.
  page_environment = { PAGE_IDLE_SECONDS = tostring(var.page_idle_seconds) }

  # functions-framework runs gunicorn with THREADS threads (its default is cpu_count x 4):
  # Google's concurrency guidance for Python is to match the function's concurrency, so an
  # instance serves exactly the requests the platform sends it, as the local twin does.
  function_environment = { for key, f in var.functions : key => merge(
    local.environment,
    contains(local.public_functions, key) ? local.public_environment : {},
    try(local.catalogue.functions[key].role, "") == "page" ? local.page_environment : {},
    local.pull && try(local.catalogue.functions[key].role, "") == "store" ? local.pull_environment : {},
    { THREADS = tostring(f.concurrency) },
  ) }

  # store_mode = "pull" (iteration 7): store-inc-counter is a long-running puller (pull.tf), not a
  # function Pub/Sub pushes to. The store alone (the catalogue's "store" role) then also gets what its
  # puller reads: the subscription's short name and the pull knobs. Push mode adds none of these.
  pull = var.store_mode == "pull"
  pull_environment = {
    PULL_SUBSCRIPTION    = "${var.topic_name}-store-inc-counter"
    PULL_BATCH_SIZE      = tostring(var.pull.batch_size)
    PULL_FLUSH_MS        = tostring(var.pull.flush_ms)
    DEDUP_WINDOW_MINUTES = tostring(var.pull.dedup_window_minutes)
  }
  # What google_cloudfunctions2_function deploys: every function but, in pull mode, the store.
  deployed_functions = { for key, f in var.functions : key => f if !(local.pull && key == "store-inc-counter") }

  # access = "auto" is resolved by the kit's runner, which reads the organization policy and
  # passes -var=access=public or -var=access=authenticated itself. Terraform alone (a manual plan
  # or destroy with an iteration's settings file that says "auto") treats it as "public". Every
  # use of the access setting goes through this local.
  access = var.access == "auto" ? "public" : var.access

  # Who invokes the three HTTP functions: everyone, or (access = "authenticated") each listed
  # principal and the load-generator account, one binding per function and principal.
  load_generator  = local.access == "authenticated" && length(var.load_generator_users) > 0
  public_invokers = local.access == "public" ? ["allUsers"] : concat(var.invokers, local.load_generator ? ["serviceAccount:visitkit-loadgen@${var.project_id}.iam.gserviceaccount.com"] : [])
  invoker_bindings = { for pair in setproduct(local.public_functions, local.public_invokers) :
  "${pair[0]} ${pair[1]}" => { function = pair[0], member = pair[1] } }

  # Below 1 vCPU a 2nd gen function serves one request at a time.
  # variables.tf repeats this rule in its Cloud Run CPU/memory validations: keep both in step.
  cpu = { for key, f in var.functions : key => coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167") }

  # The functions' Python, and the same runtime's base image for the puller (pull.tf): Google's buildpacks
  # host it in every Artifact Registry region as REGION-docker.pkg.dev/serverless-runtimes/STACK/runtimes/RUNTIME_ID,
  # google-22 being python312's default stack (https://cloud.google.com/docs/buildpacks/base-images,
  # https://cloud.google.com/run/docs/runtimes/python).
  python_runtime    = "python312"
  python_base_image = "${var.region}-docker.pkg.dev/serverless-runtimes/google-22/runtimes/${local.python_runtime}"
}

# Read once the APIs are on (cloudresourcemanager serves it): for the project number in
# service agents' names.
data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.this]
}
