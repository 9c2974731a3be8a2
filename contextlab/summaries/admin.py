from django.contrib import admin

from contextlab.summaries.models import RunSummarizer, SummaryEntry


@admin.register(SummaryEntry)
class SummaryEntryAdmin(admin.ModelAdmin[SummaryEntry]):
    list_display = ("backend", "model", "kind", "output_tokens", "cost_usd", "created_at")
    list_filter = ("backend", "kind")


@admin.register(RunSummarizer)
class RunSummarizerAdmin(admin.ModelAdmin[RunSummarizer]):
    list_display = ("run", "backend", "model", "spent_usd", "spend_cap_usd", "calls")
