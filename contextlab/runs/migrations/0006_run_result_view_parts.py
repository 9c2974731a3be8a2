import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_run_result_parts"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunResultViewPart",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("kind", models.CharField(max_length=32)),
                ("seq", models.PositiveIntegerField()),
                ("data", models.JSONField()),
                (
                    "result",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="view_parts",
                        to="runs.runresult",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("result", "kind", "seq"), name="run_result_view_part"
                    )
                ],
            },
        ),
    ]
